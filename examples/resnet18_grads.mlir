// The gradient synchronization of one ResNet-18 (torchvision) training step
// under DDP: one averaged allreduce per trainable parameter (62 tensors,
// 11689512 elements), named after the parameter.
// Try: ddp-opt --insert-powersgd=rank=2 --ddp-compression-report examples/resnet18_grads.mlir
func.func @resnet18_grad_sync(
    %g0: tensor<64x3x7x7xf32> loc("conv1.weight"),
    %g1: tensor<64xf32> loc("bn1.weight"),
    %g2: tensor<64xf32> loc("bn1.bias"),
    %g3: tensor<64x64x3x3xf32> loc("layer1.0.conv1.weight"),
    %g4: tensor<64xf32> loc("layer1.0.bn1.weight"),
    %g5: tensor<64xf32> loc("layer1.0.bn1.bias"),
    %g6: tensor<64x64x3x3xf32> loc("layer1.0.conv2.weight"),
    %g7: tensor<64xf32> loc("layer1.0.bn2.weight"),
    %g8: tensor<64xf32> loc("layer1.0.bn2.bias"),
    %g9: tensor<64x64x3x3xf32> loc("layer1.1.conv1.weight"),
    %g10: tensor<64xf32> loc("layer1.1.bn1.weight"),
    %g11: tensor<64xf32> loc("layer1.1.bn1.bias"),
    %g12: tensor<64x64x3x3xf32> loc("layer1.1.conv2.weight"),
    %g13: tensor<64xf32> loc("layer1.1.bn2.weight"),
    %g14: tensor<64xf32> loc("layer1.1.bn2.bias"),
    %g15: tensor<128x64x3x3xf32> loc("layer2.0.conv1.weight"),
    %g16: tensor<128xf32> loc("layer2.0.bn1.weight"),
    %g17: tensor<128xf32> loc("layer2.0.bn1.bias"),
    %g18: tensor<128x128x3x3xf32> loc("layer2.0.conv2.weight"),
    %g19: tensor<128xf32> loc("layer2.0.bn2.weight"),
    %g20: tensor<128xf32> loc("layer2.0.bn2.bias"),
    %g21: tensor<128x64x1x1xf32> loc("layer2.0.downsample.0.weight"),
    %g22: tensor<128xf32> loc("layer2.0.downsample.1.weight"),
    %g23: tensor<128xf32> loc("layer2.0.downsample.1.bias"),
    %g24: tensor<128x128x3x3xf32> loc("layer2.1.conv1.weight"),
    %g25: tensor<128xf32> loc("layer2.1.bn1.weight"),
    %g26: tensor<128xf32> loc("layer2.1.bn1.bias"),
    %g27: tensor<128x128x3x3xf32> loc("layer2.1.conv2.weight"),
    %g28: tensor<128xf32> loc("layer2.1.bn2.weight"),
    %g29: tensor<128xf32> loc("layer2.1.bn2.bias"),
    %g30: tensor<256x128x3x3xf32> loc("layer3.0.conv1.weight"),
    %g31: tensor<256xf32> loc("layer3.0.bn1.weight"),
    %g32: tensor<256xf32> loc("layer3.0.bn1.bias"),
    %g33: tensor<256x256x3x3xf32> loc("layer3.0.conv2.weight"),
    %g34: tensor<256xf32> loc("layer3.0.bn2.weight"),
    %g35: tensor<256xf32> loc("layer3.0.bn2.bias"),
    %g36: tensor<256x128x1x1xf32> loc("layer3.0.downsample.0.weight"),
    %g37: tensor<256xf32> loc("layer3.0.downsample.1.weight"),
    %g38: tensor<256xf32> loc("layer3.0.downsample.1.bias"),
    %g39: tensor<256x256x3x3xf32> loc("layer3.1.conv1.weight"),
    %g40: tensor<256xf32> loc("layer3.1.bn1.weight"),
    %g41: tensor<256xf32> loc("layer3.1.bn1.bias"),
    %g42: tensor<256x256x3x3xf32> loc("layer3.1.conv2.weight"),
    %g43: tensor<256xf32> loc("layer3.1.bn2.weight"),
    %g44: tensor<256xf32> loc("layer3.1.bn2.bias"),
    %g45: tensor<512x256x3x3xf32> loc("layer4.0.conv1.weight"),
    %g46: tensor<512xf32> loc("layer4.0.bn1.weight"),
    %g47: tensor<512xf32> loc("layer4.0.bn1.bias"),
    %g48: tensor<512x512x3x3xf32> loc("layer4.0.conv2.weight"),
    %g49: tensor<512xf32> loc("layer4.0.bn2.weight"),
    %g50: tensor<512xf32> loc("layer4.0.bn2.bias"),
    %g51: tensor<512x256x1x1xf32> loc("layer4.0.downsample.0.weight"),
    %g52: tensor<512xf32> loc("layer4.0.downsample.1.weight"),
    %g53: tensor<512xf32> loc("layer4.0.downsample.1.bias"),
    %g54: tensor<512x512x3x3xf32> loc("layer4.1.conv1.weight"),
    %g55: tensor<512xf32> loc("layer4.1.bn1.weight"),
    %g56: tensor<512xf32> loc("layer4.1.bn1.bias"),
    %g57: tensor<512x512x3x3xf32> loc("layer4.1.conv2.weight"),
    %g58: tensor<512xf32> loc("layer4.1.bn2.weight"),
    %g59: tensor<512xf32> loc("layer4.1.bn2.bias"),
    %g60: tensor<1000x512xf32> loc("fc.weight"),
    %g61: tensor<1000xf32> loc("fc.bias"))
    -> (tensor<64x3x7x7xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64x64x3x3xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64x64x3x3xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64x64x3x3xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64x64x3x3xf32>, tensor<64xf32>, tensor<64xf32>, tensor<128x64x3x3xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128x128x3x3xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128x64x1x1xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128x128x3x3xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128x128x3x3xf32>, tensor<128xf32>, tensor<128xf32>, tensor<256x128x3x3xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256x256x3x3xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256x128x1x1xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256x256x3x3xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256x256x3x3xf32>, tensor<256xf32>, tensor<256xf32>, tensor<512x256x3x3xf32>, tensor<512xf32>, tensor<512xf32>, tensor<512x512x3x3xf32>, tensor<512xf32>, tensor<512xf32>, tensor<512x256x1x1xf32>, tensor<512xf32>, tensor<512xf32>, tensor<512x512x3x3xf32>, tensor<512xf32>, tensor<512xf32>, tensor<512x512x3x3xf32>, tensor<512xf32>, tensor<512xf32>, tensor<1000x512xf32>, tensor<1000xf32>) {
  %r0 = ddp.allreduce mean %g0 : tensor<64x3x7x7xf32>
  %r1 = ddp.allreduce mean %g1 : tensor<64xf32>
  %r2 = ddp.allreduce mean %g2 : tensor<64xf32>
  %r3 = ddp.allreduce mean %g3 : tensor<64x64x3x3xf32>
  %r4 = ddp.allreduce mean %g4 : tensor<64xf32>
  %r5 = ddp.allreduce mean %g5 : tensor<64xf32>
  %r6 = ddp.allreduce mean %g6 : tensor<64x64x3x3xf32>
  %r7 = ddp.allreduce mean %g7 : tensor<64xf32>
  %r8 = ddp.allreduce mean %g8 : tensor<64xf32>
  %r9 = ddp.allreduce mean %g9 : tensor<64x64x3x3xf32>
  %r10 = ddp.allreduce mean %g10 : tensor<64xf32>
  %r11 = ddp.allreduce mean %g11 : tensor<64xf32>
  %r12 = ddp.allreduce mean %g12 : tensor<64x64x3x3xf32>
  %r13 = ddp.allreduce mean %g13 : tensor<64xf32>
  %r14 = ddp.allreduce mean %g14 : tensor<64xf32>
  %r15 = ddp.allreduce mean %g15 : tensor<128x64x3x3xf32>
  %r16 = ddp.allreduce mean %g16 : tensor<128xf32>
  %r17 = ddp.allreduce mean %g17 : tensor<128xf32>
  %r18 = ddp.allreduce mean %g18 : tensor<128x128x3x3xf32>
  %r19 = ddp.allreduce mean %g19 : tensor<128xf32>
  %r20 = ddp.allreduce mean %g20 : tensor<128xf32>
  %r21 = ddp.allreduce mean %g21 : tensor<128x64x1x1xf32>
  %r22 = ddp.allreduce mean %g22 : tensor<128xf32>
  %r23 = ddp.allreduce mean %g23 : tensor<128xf32>
  %r24 = ddp.allreduce mean %g24 : tensor<128x128x3x3xf32>
  %r25 = ddp.allreduce mean %g25 : tensor<128xf32>
  %r26 = ddp.allreduce mean %g26 : tensor<128xf32>
  %r27 = ddp.allreduce mean %g27 : tensor<128x128x3x3xf32>
  %r28 = ddp.allreduce mean %g28 : tensor<128xf32>
  %r29 = ddp.allreduce mean %g29 : tensor<128xf32>
  %r30 = ddp.allreduce mean %g30 : tensor<256x128x3x3xf32>
  %r31 = ddp.allreduce mean %g31 : tensor<256xf32>
  %r32 = ddp.allreduce mean %g32 : tensor<256xf32>
  %r33 = ddp.allreduce mean %g33 : tensor<256x256x3x3xf32>
  %r34 = ddp.allreduce mean %g34 : tensor<256xf32>
  %r35 = ddp.allreduce mean %g35 : tensor<256xf32>
  %r36 = ddp.allreduce mean %g36 : tensor<256x128x1x1xf32>
  %r37 = ddp.allreduce mean %g37 : tensor<256xf32>
  %r38 = ddp.allreduce mean %g38 : tensor<256xf32>
  %r39 = ddp.allreduce mean %g39 : tensor<256x256x3x3xf32>
  %r40 = ddp.allreduce mean %g40 : tensor<256xf32>
  %r41 = ddp.allreduce mean %g41 : tensor<256xf32>
  %r42 = ddp.allreduce mean %g42 : tensor<256x256x3x3xf32>
  %r43 = ddp.allreduce mean %g43 : tensor<256xf32>
  %r44 = ddp.allreduce mean %g44 : tensor<256xf32>
  %r45 = ddp.allreduce mean %g45 : tensor<512x256x3x3xf32>
  %r46 = ddp.allreduce mean %g46 : tensor<512xf32>
  %r47 = ddp.allreduce mean %g47 : tensor<512xf32>
  %r48 = ddp.allreduce mean %g48 : tensor<512x512x3x3xf32>
  %r49 = ddp.allreduce mean %g49 : tensor<512xf32>
  %r50 = ddp.allreduce mean %g50 : tensor<512xf32>
  %r51 = ddp.allreduce mean %g51 : tensor<512x256x1x1xf32>
  %r52 = ddp.allreduce mean %g52 : tensor<512xf32>
  %r53 = ddp.allreduce mean %g53 : tensor<512xf32>
  %r54 = ddp.allreduce mean %g54 : tensor<512x512x3x3xf32>
  %r55 = ddp.allreduce mean %g55 : tensor<512xf32>
  %r56 = ddp.allreduce mean %g56 : tensor<512xf32>
  %r57 = ddp.allreduce mean %g57 : tensor<512x512x3x3xf32>
  %r58 = ddp.allreduce mean %g58 : tensor<512xf32>
  %r59 = ddp.allreduce mean %g59 : tensor<512xf32>
  %r60 = ddp.allreduce mean %g60 : tensor<1000x512xf32>
  %r61 = ddp.allreduce mean %g61 : tensor<1000xf32>
  return %r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9, %r10, %r11, %r12, %r13, %r14, %r15, %r16, %r17, %r18, %r19, %r20, %r21, %r22, %r23, %r24, %r25, %r26, %r27, %r28, %r29, %r30, %r31, %r32, %r33, %r34, %r35, %r36, %r37, %r38, %r39, %r40, %r41, %r42, %r43, %r44, %r45, %r46, %r47, %r48, %r49, %r50, %r51, %r52, %r53, %r54, %r55, %r56, %r57, %r58, %r59, %r60, %r61 : tensor<64x3x7x7xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64x64x3x3xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64x64x3x3xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64x64x3x3xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64x64x3x3xf32>, tensor<64xf32>, tensor<64xf32>, tensor<128x64x3x3xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128x128x3x3xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128x64x1x1xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128x128x3x3xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128x128x3x3xf32>, tensor<128xf32>, tensor<128xf32>, tensor<256x128x3x3xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256x256x3x3xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256x128x1x1xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256x256x3x3xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256x256x3x3xf32>, tensor<256xf32>, tensor<256xf32>, tensor<512x256x3x3xf32>, tensor<512xf32>, tensor<512xf32>, tensor<512x512x3x3xf32>, tensor<512xf32>, tensor<512xf32>, tensor<512x256x1x1xf32>, tensor<512xf32>, tensor<512xf32>, tensor<512x512x3x3xf32>, tensor<512xf32>, tensor<512xf32>, tensor<512x512x3x3xf32>, tensor<512xf32>, tensor<512xf32>, tensor<1000x512xf32>, tensor<1000xf32>
}
